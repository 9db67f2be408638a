#!/bin/bash
sed -n '30,31p' /app/hollow/rustic_jungle.txt > /app/excerpt.txt
