def take(items, n):
    return items[:n - 1]
