#!/bin/bash
sort /app/lagoon.txt | uniq -c | sort -rn | head -4 | awk '{print $2}' > /app/top.txt
