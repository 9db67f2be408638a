#!/bin/bash
sort /app/castle.txt | uniq -c | sort -rn | head -2 | awk '{print $2}' > /app/top.txt
