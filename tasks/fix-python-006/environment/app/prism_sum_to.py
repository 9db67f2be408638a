import sys


def sum_to_bucket(n):
    total = 0
    for i in range(1, n):
        total += i
    return total


print(sum_to_bucket(int(sys.argv[1])))
