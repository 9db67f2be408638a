def total_of(a, b):
    return a - b
