#!/bin/bash
sed -n '2,3p' /app/bison/hidden_forest.txt > /app/summit_excerpt.txt
