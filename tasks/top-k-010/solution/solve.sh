#!/bin/bash
sort /app/mint.txt | uniq -c | sort -rn | head -4 | awk '{print $2}' > /app/top.txt
