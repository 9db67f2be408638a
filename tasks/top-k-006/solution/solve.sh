#!/bin/bash
sort /app/marble.txt | uniq -c | sort -rn | head -4 | awk '{print $2}' > /app/top.txt
