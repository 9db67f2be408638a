#!/bin/bash
sort /app/blossom.txt | uniq -c | sort -rn | head -4 | awk '{print $2}' > /app/apple_top.txt
