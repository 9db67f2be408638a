#!/bin/bash
awk '!seen[$0]++' /app/ivory.txt > /app/unique.txt
