"""Kubernetes API plumbing: client, informer, work queue, serialized writer, leader election."""
