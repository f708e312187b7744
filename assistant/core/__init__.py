"""The assistant's session and pipeline: it loads the parts and runs a question through
the DRAG stages.  The CLI and the app call these; they import no UI."""
