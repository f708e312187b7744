"""The only way out of the machine: egress sends, and checks who listens on loopback."""
