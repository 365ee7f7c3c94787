"""Run the example Flower app on Flower's simulation engine (Ray); print a JSON summary.

Started by ``tests/test_flower_simulation.py`` in its own process (Ray and Flower's
process-global run identity stay out of the test process):
``python tests/_flower_simulation.py NODES ROUNDS LEDGER POLICY``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "flower-eval"))

from flower_eval import server_app
from flower_eval.client_app import app as client_app
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from flwr.simulation import run_simulation


def main() -> None:
    nodes, rounds, ledger, policy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    summary: dict[str, object] = {}
    app = ServerApp()

    @app.main()
    def _main(grid: Grid, context: Context) -> None:
        overrides = {
            "num-nodes": nodes,
            "num-server-rounds": rounds,
            "ledger": ledger,
            "policy": policy,
        }
        strategy, result = server_app.run(grid, context, overrides)
        summary["rounds"] = {
            str(r): {
                "health": {k: vars(h) for k, h in rep.health.items()},
                "released": len(rep.releases),
                "refused": [v.failures[0].name for v in rep.refusals],
                "unregistered": len(rep.unregistered),
                "failed_reasons": [s.reason for s in rep.nodes if s.status == "failed"],
            }
            for r, rep in strategy.rounds.items()
        }
        summary["record_keys"] = sorted(result.evaluate_metrics_clientapp[rounds])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # run_simulation is deprecated in favour of `flwr run`
        resources = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}}
        run_simulation(app, client_app, num_supernodes=nodes, backend_config=resources)
    print("SIMULATION-SUMMARY " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
