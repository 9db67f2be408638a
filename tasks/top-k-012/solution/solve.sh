#!/bin/bash
sort /app/apple.txt | uniq -c | sort -rn | head -3 | awk '{print $2}' > /app/crater_top.txt
