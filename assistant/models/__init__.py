"""The models: the local student (llama.cpp in-process), the teacher client, the
embedded teacher server, the embedder, and the model files and builds they load."""
