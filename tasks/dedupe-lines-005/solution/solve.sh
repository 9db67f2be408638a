#!/bin/bash
awk '!seen[$0]++' /app/velvet.txt > /app/unique.txt
