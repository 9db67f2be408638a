#!/bin/bash
sort /app/castle.txt | uniq -c | sort -rn | head -4 | awk '{print $2}' > /app/birch_top.txt
