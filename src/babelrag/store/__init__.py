"""Storage engines behind one protocol: embedded Qdrant Edge (default) and Qdrant server/cluster."""
