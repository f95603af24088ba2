"""The HTTP service: API, web page, limits."""
