"""The stages of the DRAG method (arXiv 2506.01954): evidence, ranking, the knowledge
graph, the student's prompt, reading the teacher's replies, recall from the cache."""
