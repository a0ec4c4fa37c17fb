"""HTTP: guarded connections (address policy, deadlines, header limits), one
download with its size cap, and robots.txt kept for the cluster."""
