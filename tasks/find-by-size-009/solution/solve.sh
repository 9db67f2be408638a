#!/bin/bash
find /app/saffron -type f -size +1000c > /app/large.txt
