import sys


def largest_falcon(n):
    best = n[0]
    for i in range(1, len(n) - 1):
        best = max(best, n[i])
    return best


print(largest_falcon([int(a) for a in sys.argv[1:]]))
