# The Ray client of `ksearch run --executor ray` (crates/run/src/executor/ray.rs). ksearch starts
# one per drive as `python3 -c THIS ADDRESS KSEARCH VERSION`. Protocol, one JSON object a line:
#   out {"ready": {"nodes": [...], "cpus": N, "gpus": N}} | {"fatal": "why"}   (once, first)
#   in  {"id": N, "gpu": bool, "task": NAME | null, "files": {rel: text} | null,
#        "solution": {...}, "args": [...]}
#   out {"id": N, "record": {...} | null, "node": {...}, "attempts": K, "error": str | null}
#   out {"id": N, "lost": "why", "attempts": K}            (a worker or node died twice)
#   out {"id": N, "cluster_lost": "why"}                    (the cluster is gone)
# A job's task runs `ksearch eval` on the node, in a temp dir holding the task and solution.
import json
import os
import subprocess
import sys
import time
import tempfile
import threading

LOCK = threading.Lock()


def out(obj):
    with LOCK:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def provenance():
    """Where this task runs: the node and its GPU (the one Ray gave it, if any)."""
    import ray

    info = {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address()}
    try:
        p = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,uuid", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )
        line = p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else ""
        if line:
            name, driver, uuid = [x.strip() for x in line.split(",")[:3]]
            info.update({"gpu": name, "driver": driver, "gpu_uuid": uuid})
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    return info


def probe(ksearch):
    info = provenance()
    try:
        p = subprocess.run([ksearch, "--version"], capture_output=True, text=True, timeout=60)
        info["version"] = p.stdout.strip() if p.returncode == 0 else None
        info["problem"] = None if p.returncode == 0 else (p.stderr.strip() or f"exit {p.returncode}")
    except OSError as e:
        info["version"], info["problem"] = None, str(e)
    return info


def evaluate(ksearch, job):
    node = provenance()
    with tempfile.TemporaryDirectory(prefix="ksearch-ray-") as d:
        task = job["task"]
        if job["files"] is not None:
            root = os.path.join(d, "task")
            for rel, text in job["files"].items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            task = root
        sol = os.path.join(d, "solution.json")
        with open(sol, "w") as f:
            json.dump(job["solution"], f)
        cmd = [ksearch, "eval", task, sol, "--json"] + job["args"]
        env = dict(os.environ)
        if not job["gpu"]:
            # Ray hands out the node's CPUs one task each (num_cpus=1), so it is the arbiter:
            # the node's machine-wide cpu:0 lock would run its CPU tasks one at a time.
            env["KSEARCH_DEVICE_LOCK_DIR"] = os.path.join(d, "locks")
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=d, env=env)
    record = None
    for line in reversed(p.stdout.strip().splitlines()):
        try:
            record = json.loads(line)
            break
        except ValueError:
            continue
    error = None
    if record is None:
        error = f"`ksearch eval` on node {node['ip']} exited {p.returncode}: {p.stderr.strip()[-2000:]}"
    return {"record": record, "node": node, "error": error}


def main():
    address, ksearch, version = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except Exception as e:  # noqa: BLE001 - whatever stops the import is the message
        out({"fatal": f"python3 cannot import ray ({e}); install it with `pip install ray`"})
        return 2
    for attempt in range(3):
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
            break
        except Exception as e:  # noqa: BLE001
            # A Ray client server that reached us but failed to start this client's server
            # process (seen on a loaded 2-core machine: psutil.ZombieProcess in its proxier) is
            # worth two more tries; anything else, an unreachable address first, is not.
            if attempt < 2 and "Initialization failure from server" in str(e):
                time.sleep(2.0)
                continue
            out({"fatal": f"cannot connect to the Ray cluster at {address}: {e}"})
            return 2
    remote_probe = ray.remote(num_cpus=0)(probe)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = [
        remote_probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(ksearch)
        for n in nodes
    ]
    infos = ray.get(refs, timeout=120)
    bad = []
    for info in infos:
        if info["version"] is None:
            bad.append(f"node {info['ip']} ({info['node_id'][:12]}) cannot run `{ksearch}`: {info['problem']}")
        elif info["version"] != version:
            bad.append(f"node {info['ip']} ({info['node_id'][:12]}) runs {info['version']}, this is {version}")
    if bad:
        out({"fatal": "; ".join(bad)})
        return 2
    res = ray.cluster_resources()
    out({"ready": {"nodes": infos, "cpus": int(res.get("CPU", 0)), "gpus": int(res.get("GPU", 0))}})

    # Ray's own retries are off: a re-run is ksearch's decision (once), so it is counted.
    remote_eval = ray.remote(max_retries=0)(evaluate)
    died = (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.LocalRayletDiedError)

    def serve(job):
        opts = {"num_gpus": 1, "num_cpus": 0} if job["gpu"] else {"num_cpus": 1}
        attempts, why = 0, ""
        while attempts < 2:
            attempts += 1
            try:
                res = ray.get(remote_eval.options(**opts).remote(ksearch, job))
                out({"id": job["id"], "attempts": attempts, **res})
                return
            except died as e:
                why = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                continue
            except ray.exceptions.RayTaskError as e:
                out({"id": job["id"], "attempts": attempts, "record": None, "node": None, "error": str(e)[-2000:]})
                return
            except Exception as e:  # noqa: BLE001 - the connection to the cluster is gone
                out({"id": job["id"], "cluster_lost": f"{type(e).__name__}: {e}"[:2000]})
                return
        out({"id": job["id"], "lost": why, "attempts": attempts})

    for line in sys.stdin:
        if line.strip():
            threading.Thread(target=serve, args=(json.loads(line),), daemon=True).start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
