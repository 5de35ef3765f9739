"""twin-cpu"""
