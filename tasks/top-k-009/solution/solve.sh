#!/bin/bash
sort /app/birch.txt | uniq -c | sort -rn | head -3 | awk '{print $2}' > /app/goblet_top.txt
