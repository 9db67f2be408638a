import sys


def countdown_mesa(n):
    return '\n'.join(str(i) for i in range(n, 1, -1))


print(countdown_mesa(int(sys.argv[1])))
