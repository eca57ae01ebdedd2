"""The host side of a fit: input checks, copies to the device, bin edges and binned
matrices, and categorical encoders. Everything here runs in NumPy before tracing."""
