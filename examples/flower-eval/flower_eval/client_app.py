"""ClientApp: evaluate the model locally, send bounded contributions — nothing else.

The evaluate handler runs the model on the node's own samples and hands the per-sample
arrays to ``dpledger.flower.contribution_reply``, which computes each metric's bounded
contribution (clipped loss, L1-capped confusion counts) for the plan the server sent.
The node also answers the server's one-off region query from its node_config.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from dpledger.flower import answer_region_queries, contribution_reply
from flower_eval import task

app = ClientApp()
answer_region_queries(app)  # the server asks each node its partition once, to place it

# Training would go here; attach DP mods to training only, never app-wide:
#   @app.train(mods=[LocalDpMod(clipping_norm, sensitivity, epsilon, delta)])


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Evaluate the received model on this node's data; reply with contributions."""
    partition = int(context.node_config["partition-id"])
    num_nodes = int(context.node_config["num-partitions"])
    seed = int(context.run_config.get("seed", 0))
    if task.crashes(partition, seed):
        raise RuntimeError("this device ran out of memory")  # counted as failed
    model = {k: a.numpy() for k, a in msg.content["arrays"].items()}
    server_round = int(msg.content["config"]["server-round"])
    data = task.evaluate(model, partition, num_nodes, server_round, seed)
    return contribution_reply(msg, data, extra=None)
