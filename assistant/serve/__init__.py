"""`drag serve`: one resident process on the loopback interface that keeps the models
loaded and speaks OpenAI's chat API, so that any program on this machine can ask
through drag (model ``drag``: the DRAG pipeline) or through its privacy layer (any other
model name: the configured teacher, every message sanitized and the reply restored)."""
