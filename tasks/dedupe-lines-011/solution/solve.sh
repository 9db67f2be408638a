#!/bin/bash
awk '!seen[$0]++' /app/bison.txt > /app/unique.txt
