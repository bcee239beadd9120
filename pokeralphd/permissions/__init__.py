"""Permissions: deciding an agent's tool calls by the approval rules, else by the
battle's policy (a person through the inbox, by default)."""
