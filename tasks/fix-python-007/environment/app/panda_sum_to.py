import sys


def sum_to_timber(n):
    total = 0
    for i in range(1, n):
        total += i
    return total


print(sum_to_timber(int(sys.argv[1])))
