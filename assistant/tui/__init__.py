"""The Textual app (`drag` with no arguments); the core never imports it."""
