"""Kubernetes API plumbing shared by the allocator, scheduler and controller.

- `client`: `KubeApi` (typed verbs for any kind via `ResourceRef`), `connect()`, well-known refs.
- `errors`: one exception tree (NotFound, Conflict, AlreadyExists, Gone, ...).
- `informer`: list+watch cache with indexes and change handlers.
- `workqueue`: keyed queue (dedup, one worker per key, backoff) and `run_workers`.
- `writer`: queue-serialized writes with conflict re-apply and coalescing.
- `leader`: Lease-based leader election that never lets two leaders act.
- `events`: best-effort Kubernetes Event recorder.
- `metrics`: the Prometheus counters of all of the above.
"""
