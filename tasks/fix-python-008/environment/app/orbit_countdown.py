import sys


def countdown_plum(n):
    return '\n'.join(str(i) for i in range(n, 1, -1))


print(countdown_plum(int(sys.argv[1])))
