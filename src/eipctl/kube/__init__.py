"""Kubernetes API plumbing shared by the allocator, scheduler, controller and nodeips.

- `client`: `KubeApi` (typed verbs for any kind via `ResourceRef`), `connect()`, well-known refs.
- `errors`: one exception tree (NotFound, Conflict, AlreadyExists, Gone, ...).
- `informer`: list+watch cache with indexes and change handlers.
- `workqueue`: keyed queue (dedup, one worker per key, backoff) and `run_workers`.
- `writer`: queue-serialized writes with conflict re-apply and coalescing; `write_ids`:
  whether an ambiguous write landed.
- `verbs`: one protocol per API or writer verb, combined by whoever needs them.
- `manager`: the lifecycle of a leader-elected process (caches, terms, health, stop).
- `leader`: Lease-based leader election that never lets two leaders act.
- `events`: best-effort Kubernetes Event recorder.
- `metrics`: the Prometheus counters of all of the above.
"""
