#!/bin/bash
sort /app/raven.txt | uniq -c | sort -rn | head -3 | awk '{print $2}' > /app/top.txt
