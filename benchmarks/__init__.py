"""``make bench``: dpledger measured against baselines run in the same process.

``python -m benchmarks [--quick] [--json [PATH]] [--cases 1,3]`` prints one aligned
table: per case, what was measured, dpledger's figure, the baseline's, their ratio, the
target and whether it is met. Cases:

1. client contributions (spatial set + confusion matrix) vs a plain-Python loop;
2. FLAM metrics from summed measures vs scikit-learn on the concatenated samples;
3. ledger releases/s on SQLite (and PostgreSQL) vs raw durable write loops, with a
   per-release breakdown;
4. end to end on the large fleet: wall time and peak RSS;
5. the noise and lifetime-ε cost of composition choices.

Benchmarks are not tests: nothing here asserts a speed. ``--quick`` shrinks every size
so that the smoke test (``tests/test_bench_smoke.py``) can keep the harness from rotting.
"""
