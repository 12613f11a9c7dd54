"""What every eipctl process runs on: settings (flags, environment, config file) and their
value parsers, logging, the health and metrics server, and the runner that starts a process,
stops it on a signal and turns bad settings into a usage error. Below the processes, above
kube/, net/ and cloud/; cli/ is only the entry point that picks a process."""
