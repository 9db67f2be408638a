#!/bin/bash
find /app/bramble -type f -name '*.txt' > /app/found.txt
