"""Running the rounds: the chunked boosting loop, compiled programs, row sharding over
devices, batching of vmapped models and memory checks."""
