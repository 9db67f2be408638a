import sys


def countdown_bridge(n):
    return '\n'.join(str(i) for i in range(n, 1, -1))


print(countdown_bridge(int(sys.argv[1])))
