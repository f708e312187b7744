"""The user's own files: finding them, reading them and cutting them into chunks.

Nothing here needs a model: :mod:`.readers` walks the paths given and reads plain
text, Markdown, chat exports, e-mail and (with pypdf) PDF, skipping what it cannot
read with a one-line reason; :mod:`.chunks` cuts a read file into chunks that keep
whole messages and their chat time.  The index over the chunks is built by
:mod:`assistant.drag.localfiles`, stored by :mod:`assistant.store.files`.
"""
