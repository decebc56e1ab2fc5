"""celerbench: the driver behind `bench/run <scenario>` (bench/README.md)."""
