#!/bin/bash
sort /app/lagoon.txt | uniq -c | sort -rn | head -3 | awk '{print $2}' > /app/moss_top.txt
