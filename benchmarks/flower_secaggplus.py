"""One SecAgg+ round of Flower (``flwr`` 1.42) among n in-process clients, headless: run by
``bench_secagg.py`` with the interpreter of Flower's own virtual environment (it never imports
privhist). Prints one JSON object: server CPU seconds, mean client CPU seconds, mean bytes each
client uploads, wall seconds and whether the sum was exact.

Harness (PEERS.md, "Flower"): a ``Grid`` whose ``send_and_receive`` deep-copies each message,
sets its run, node and message ids, and calls ``secaggplus_mod`` for the addressed client; a
``LegacyContext`` with ``FedAvg(min_fit_clients=n, min_available_clients=n)``; the workflow's
``SecAggPlusWorkflow(num_shares=k + 1, reconstruction_threshold=t)`` (Flower counts the client
itself among its shares). Each client sends a 0/1 vector of length d; the server's result is read
back as counts (n_survivors times FedAvg's mean). Dropping clients skip their reply at the
masked-vector stage. Client CPU is measured around each client's ``secaggplus_mod`` call, server
CPU is the process's CPU time less the clients'; upload bytes are the serialised sizes of every
client reply.

Usage: /work/flwr-venv/bin/python benchmarks/flower_secaggplus.py N D K T DROP SEED
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import sys
import time
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.client.mod import secaggplus_mod
from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays
from flwr.common.serde import message_to_proto
from flwr.compat.common import recorddict_compat as compat
from flwr.server.compat.grid_client_proxy import GridClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import FedAvg
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key
from flwr.serverapp.grid import Grid
from flwr.supercore.task_identity import TaskIdentity


class Loop(Grid):  # type: ignore[misc]
    """Delivers every message to an in-process client at once."""

    def __init__(self, data: dict[int, np.ndarray], dropped: set[int]) -> None:
        self.data = data
        self.dropped = dropped
        self.ctx = {
            nid: Context(run_id=1, node_id=nid, node_config={}, state=RecordDict(), run_config={})
            for nid in data
        }
        self.client_cpu = 0.0
        self.upload: dict[int, int] = dict.fromkeys(data, 0)
        self._ids = itertools.count(1)

    def set_run(self, run: Any) -> None:
        pass

    @property
    def run(self) -> Any:
        return None

    def create_message(self, *args: Any, **kwargs: Any) -> Message:
        raise NotImplementedError

    def get_node_ids(self) -> list[int]:
        return list(self.data)

    def push_messages(self, messages: Any) -> Any:
        raise NotImplementedError

    def pull_messages(self, message_ids: Any) -> Any:
        raise NotImplementedError

    def _fit(self, nid: int) -> Any:
        x = self.data[nid]

        def call_next(msg: Message, ctxt: Context) -> Message:
            res = compat.fitres_to_recorddict(
                _FitRes(ndarrays_to_parameters([x]), len(x) and 1), keep_input=True
            )
            return Message(res, reply_to=msg)

        return call_next

    def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> list[Message]:
        out = []
        for msg in messages:
            nid = msg.metadata.dst_node_id
            m = copy.deepcopy(msg)
            m.metadata.__dict__["_run_id"] = 1
            m.metadata.__dict__["_src_node_id"] = 0
            m.metadata.__dict__["_message_id"] = str(next(self._ids))
            configs = m.content.config_records.get("secaggplus_configs")
            stage = None if configs is None else configs.get("stage")
            if stage == "collect_masked_vectors" and nid in self.dropped:
                continue
            c0 = time.process_time()
            reply = secaggplus_mod(m, self.ctx[nid], self._fit(nid))
            self.client_cpu += time.process_time() - c0
            self.upload[nid] += len(message_to_proto(reply).SerializeToString())
            out.append(reply)
        return out


def _fitres_class() -> Any:
    from flwr.common import Code, FitRes, Status

    def make(params: Any, num: int) -> Any:
        return FitRes(Status(Code.OK, ""), params, 1, {})

    return make


_FitRes = _fitres_class()


def main() -> int:
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    n, d, k, t = (int(v) for v in sys.argv[1:5])
    drop, seed = float(sys.argv[5]), int(sys.argv[6])
    rng = np.random.default_rng(seed)
    ids = list(range(1, n + 1))
    data = {nid: rng.integers(0, 2, size=d).astype(np.float32) for nid in ids}
    dropped = set(random.Random(seed).sample(ids, round(drop * n)))
    grid = Loop(data, dropped)
    strategy = FedAvg(min_fit_clients=n, min_available_clients=n, fraction_fit=1.0)
    ctx = LegacyContext(
        Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config={}),
        strategy=strategy,
    )
    for nid in ids:
        ctx.client_manager.register(GridClientProxy(nid, grid, 1))
    ctx.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({Key.CURRENT_ROUND: 1})
    ctx.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord([np.zeros(d, dtype=np.float32)])
    result: dict[str, Any] = {}
    orig = strategy.aggregate_fit

    def aggregate_fit(rnd: int, results: Any, failures: Any) -> Any:
        params, metrics = orig(rnd, results, failures)
        result["mean"] = parameters_to_ndarrays(params)[0]
        return params, metrics

    strategy.aggregate_fit = aggregate_fit  # type: ignore[method-assign]
    workflow = SecAggPlusWorkflow(num_shares=k + 1, reconstruction_threshold=t)
    c0, w0 = time.process_time(), time.perf_counter()
    workflow(grid, ctx)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    survivors = [nid for nid in ids if nid not in dropped]
    exact = sum(data[nid] for nid in survivors)
    ok = "mean" in result and bool(
        np.allclose(np.asarray(result["mean"]) * len(survivors), exact, atol=0.5)
    )
    print(
        json.dumps(
            {
                "server_cpu": cpu - grid.client_cpu,
                "client_cpu": grid.client_cpu / n,
                "upload": sum(grid.upload.values()) / n,
                "wall": wall,
                "ok": ok,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
