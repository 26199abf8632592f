"""Put this folder on PYTHONPATH to run Inspect's mock model offline in a subprocess (see offline_mockllm.py)."""

try:
    import offline_mockllm

    offline_mockllm.install()
except ImportError:  # tiktoken (with inspect-ai) is not installed: nothing to stand in for
    pass
