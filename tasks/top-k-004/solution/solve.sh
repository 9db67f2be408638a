#!/bin/bash
sort /app/apple.txt | uniq -c | sort -rn | head -3 | awk '{print $2}' > /app/top.txt
