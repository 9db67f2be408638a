#!/bin/bash
sort /app/violet.txt | uniq -c | sort -rn | head -4 | awk '{print $2}' > /app/fern_top.txt
