"""Automation: new OAB editions (portal sensor, weekly schedule) and new models (registry sensor)."""
